"""The pieces of bench/chaos_fleet.py: the seeded fault schedule (schedule.py), a fault-injecting proxy in
front of Prometheus (promproxy.py), the fleet of real daemons and what it records (fleet.py), and the
invariants judged from the audit log, the decision records and Prometheus (invariants.py)."""
