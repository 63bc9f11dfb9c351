"""The ome.io/v1beta1 API as pure data: models, defaults, merge, runtime selection, validation. No I/O here."""
