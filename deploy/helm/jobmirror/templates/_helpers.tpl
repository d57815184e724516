{{/* The name prefix: "jobmirror" for a release named jobmirror (the names of deploy/). */}}
{{- define "jobmirror.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Every object: deploy/'s part-of label plus Helm's standard labels. */}}
{{- define "jobmirror.labels" -}}
app.kubernetes.io/part-of: jobmirror
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* The controller Pods (selectors of the Deployment, Service, PDB and ServiceMonitor). */}}
{{- define "jobmirror.selectorLabels" -}}
app.kubernetes.io/name: {{ default .Chart.Name .Values.nameOverride }}
app.kubernetes.io/component: controller
{{- end -}}

{{- define "jobmirror.serviceAccountName" -}}
{{ include "jobmirror.fullname" . }}
{{- end -}}

{{- define "jobmirror.serviceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "jobmirror.serviceAccountName" . }}
{{- end -}}

{{- define "jobmirror.workerSecretName" -}}
{{- default (printf "%s-worker-kubeconfigs" (include "jobmirror.fullname" .)) .Values.workerKubeconfigs.existingSecret -}}
{{- end -}}

{{/* The controller's config file, built from the values (checked here; the controller checks the rest). */}}
{{- define "jobmirror.config" -}}
{{- range $k := list "workers" "metricsAddress" "leaderElection" "managerKubeconfig" "inspectAddress" -}}
{{- if hasKey $.Values.config $k -}}
{{- fail (printf "config.%s: set it through the chart's own values (workers, metricsPort, leaderElection, inspect), not under config" $k) -}}
{{- end -}}
{{- end -}}
{{- if not .Values.config.controllerName -}}
{{- fail "config.controllerName: required (the admission policy allows exactly this spec.managedBy)" -}}
{{- end -}}
{{- $workers := list -}}
{{- if .Values.managerAsWorker.enabled -}}
{{- $workers = append $workers (dict "name" .Values.managerAsWorker.name "kubeconfig" "/etc/jobmirror/config/in-cluster.kubeconfig") -}}
{{- end -}}
{{- range $i, $w := .Values.workers -}}
{{- if not (kindIs "map" $w) -}}
{{- fail (printf "workers[%d]: must be a map with at least `name`" $i) -}}
{{- end -}}
{{- if not $w.name -}}
{{- fail (printf "workers[%d].name: required" $i) -}}
{{- end -}}
{{- $entry := merge (dict "name" $w.name "kubeconfig" (printf "/etc/jobmirror/workers/%s.kubeconfig" $w.name)) (deepCopy $w) -}}
{{- $workers = append $workers $entry -}}
{{- end -}}
{{- if not $workers -}}
{{- fail "workers: at least one worker is required (or managerAsWorker.enabled)" -}}
{{- end -}}
{{- $le := dict "enabled" .Values.leaderElection.enabled "namespace" .Release.Namespace "leaseName" .Values.leaderElection.leaseName -}}
{{- range $k := list "leaseDuration" "renewDeadline" "retryPeriod" -}}
{{- if hasKey $.Values.leaderElection $k -}}
{{- $_ := set $le $k (get $.Values.leaderElection $k) -}}
{{- end -}}
{{- end -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $_ := set $cfg "workers" $workers -}}
{{- $_ := set $cfg "metricsAddress" (printf ":%d" (int .Values.metricsPort)) -}}
{{- $_ := set $cfg "leaderElection" $le -}}
{{- if .Values.inspect.enabled -}}
{{- $_ := set $cfg "inspectAddress" (printf ":%d" (int .Values.inspect.port)) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* "true" when the config's kinds include JobSet: jobset-rbac.yaml then grants jobsets (as deploy/jobset/). */}}
{{- define "jobmirror.mirrorsJobSets" -}}
{{- if has "JobSet" (.Values.config.kinds | default (list "Job")) -}}true{{- end -}}
{{- end -}}
