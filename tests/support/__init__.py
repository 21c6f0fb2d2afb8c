"""What the tests share: waiting for a state (:mod:`.waiting`), request bodies for the
catalogue and jobs (:mod:`.factories`), rows seeded into the database (:mod:`.seed`), and
the real services they run against (:mod:`.pg`: PostgreSQL; :mod:`.served`: Redis, the
Kafka-protocol broker, HTTP targets; :mod:`.netguard`: nothing leaves loopback).

Test files import from here rather than keeping their own copies, so a wait fails the
same way everywhere (naming what it waited for and the last value it saw).
"""
