"""The three controllers: InferenceService -> InferenceReplica -> Instance. Each reconciles one queue key from the
caches; its planning is pure (`desired`, `plan`, `status` modules) and its I/O goes through omenative.kube."""
