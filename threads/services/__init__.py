"""Every write of ctxadmin, one transaction each. Modules by what they write."""
