"""Pure builders of the objects omenative writes: pod templates, pods, Services, PodGroups, autoscalers."""
