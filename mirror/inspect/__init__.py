"""What users see: the ``kubectl jobmirror`` plugin, its reads, and the inspect API with its TLS."""
