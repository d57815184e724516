# jobmirror image: the mirror controller (entry point `jobmirror`), and the builtin Job
# controller from the same image (`command: ["jobmirror-builtin", ...]` in a Pod spec,
# `docker run --entrypoint jobmirror-builtin ...`).
#
#   docker build -t jobmirror:dev .
#
# Two stages: the builder installs the package and its dependencies into a venv
# (wheels only, nothing is compiled); the final stage is the same slim Python base
# plus that venv, a non-root user and no pip, compilers or source tree.
#
# PYTHON_IMAGE is the base: by default the public Python 3.11 slim image, which is what
# you pull on a laptop. Any Debian-family image with python 3.11 (as `python`), venv and
# useradd works: where nothing can be pulled, kindbed/images.py builds one from Debian's
# python3 and passes --build-arg PYTHON_IMAGE=jobmirror.local/python:3.11-bookworm-r<N>.
# No BuildKit-only syntax, so the legacy builder (DOCKER_BUILDKIT=0) builds it offline.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1
RUN python -m venv /opt/venv
WORKDIR /src
# Dependencies first, in their own layer: rebuilt only when the lock changes. The controller's
# lock only (no test, bench or docs packages), every file checked against its sha256.
COPY requirements/controller.txt /tmp/requirements.txt
RUN /opt/venv/bin/pip install --no-cache-dir --require-hashes -r /tmp/requirements.txt
COPY pyproject.toml README.md LICENSE ./
# Only the packages the controllers import (not tests, the cluster bed or benchmarks).
COPY mirror ./mirror
COPY builtin_controller ./builtin_controller
COPY kruntime ./kruntime
COPY jobapi ./jobapi
RUN /opt/venv/bin/pip install --no-cache-dir --no-deps . \
 && /opt/venv/bin/python -m pip uninstall -y pip setuptools \
 && /opt/venv/bin/jobmirror --version \
 && /opt/venv/bin/jobmirror-builtin --help > /dev/null

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="jobmirror" \
      org.opencontainers.image.description="Mirror batch/v1 Jobs claimed through spec.managedBy into worker clusters"
# A fixed numeric non-root user, so the kubelet can verify runAsNonRoot; no home, no shell.
RUN if python -m pip --version >/dev/null 2>&1; then python -m pip uninstall -y pip setuptools wheel; fi \
 && groupadd --system --gid 65532 jobmirror \
 && useradd --system --uid 65532 --gid 65532 --home-dir /nonexistent --no-create-home \
        --shell /usr/sbin/nologin jobmirror
COPY --from=builder /opt/venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
USER 65532:65532
WORKDIR /
EXPOSE 8080
ENTRYPOINT ["jobmirror"]
CMD ["run", "--config", "/etc/jobmirror/config/config.yaml"]
