"""Layer 1, the plugin host: the Backend wrapper and errors, the hookspecs, the built-in defaults, discovery of installed plugins, and patching (imports nothing of kprof above it)."""
