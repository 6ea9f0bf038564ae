"""Search with no captions: ImageNet's classes and their words, and the zero-caption system as a prior inside every fitted system."""
