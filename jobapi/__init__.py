"""The ``batch/v1`` Job vocabulary both controllers speak.

One place for what a Job *is* on the wire: condition types and reasons and the rules for
reading and setting conditions (``conditions``), ``metav1.Time`` formatting and parsing
(``times``), the completion-index interval type (``intervals``), the well-known names the
API and the controllers write (``names``), and typed views of the raw JSON bodies with
non-mutating accessors (``objects``). The mirror (``mirror/``) and the builtin Job
controller (``builtin_controller/``) import these instead of keeping copies, so they
cannot drift apart; ``tests/unit/test_jobapi.py`` pins the rules that used to disagree.

Where a rule differs on purpose between the two controllers, both variants live here under
names that say which is which (e.g. ``conditions.set_restamping`` vs
``conditions.set_keeping_transition``; ``Intervals.parse`` vs ``Intervals.parse_lenient``;
``times.parse_time`` vs ``times.parse_time_seconds``).
"""
