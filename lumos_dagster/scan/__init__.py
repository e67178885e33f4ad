"""The snapshot run: discovery, the pipeline and its steps, the schema readers, recording."""
