"""omenative: runs OME InferenceServices as Instances, the way OME's OMENative mode does."""

__version__ = "0.1.0"
