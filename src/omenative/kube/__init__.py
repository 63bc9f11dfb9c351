"""The only layer that talks to the Kubernetes API: client, reflector, informer cache, queues, apply, events, lease."""
