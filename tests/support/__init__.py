"""What the tests share: waiting for a state (:mod:`.waiting`) and request bodies for the
catalogue and jobs (:mod:`.factories`).

Test files import from here rather than keeping their own copies, so a wait fails the
same way everywhere (naming what it waited for and the last value it saw).
"""
