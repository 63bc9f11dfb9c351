"""`kubectl ome`: the kubectl plugin that reads OMENative status (a synchronous client fits a CLI)."""
