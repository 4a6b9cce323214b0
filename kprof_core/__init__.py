"""kprof's core: the profiler, the plugin host and the reports. Private: no stable API.

Import ``kprof`` (what users call) and ``kprof.plugin`` (what backend plugins use) instead;
the modules here move between releases. Importing this package imports none of them: each
module is imported where it is used, and ``kprof/__init__.py`` lists the public names.
"""
