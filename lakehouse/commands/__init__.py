"""The ``lakehouse`` commands, by subject; :mod:`lakehouse.cli` assembles them into one app.

- :mod:`~lakehouse.commands.common`: the app, its console, options and error printing;
- :mod:`~lakehouse.commands.views`: ``refresh``, ``suspend``, ``resume``, ``history``,
  ``status``, ``explain``, ``wait`` (through :class:`lakehouse.api.Pipeline`);
- :mod:`~lakehouse.commands.service`: ``run``, ``serve``, ``demo``, ``jars``, ``hash-secret``.
"""
