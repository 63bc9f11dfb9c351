"""Reading the cluster: pure summaries of cached objects (pods, Instances) that the controllers plan from."""
