"""Who leaves the manager's waiting line first: priority, fair share between tenants, quotas, backfill.

Pure rules over plain values (no I/O, no clock of their own): :mod:`.tenants` says whose a Job
is, :mod:`.shares` what each tenant runs and its weighted dominant share, :mod:`.quota` whether a
Job fits its tenant's quota, :mod:`.order` how two waiting Jobs compare, :mod:`.backfill` when the
Job first in line for a worker would start and whether a later one may use the room until then.
:class:`mirror.placer.Placer` applies them to the waiting line.
"""
