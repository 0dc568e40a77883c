"""The lifecycle controller: the use case that advances every accepted workflow.

``controller.py`` is one tick; ``step.py`` one workflow's step of it; ``working_set.py`` and
``tick_index.py`` the controller's memory between ticks; ``tick_report.py`` what a tick did;
``process.py`` where the controller runs; ``leadership.py`` the lease that makes one server the
controller of a database.
"""
