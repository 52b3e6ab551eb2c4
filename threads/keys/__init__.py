"""The keys the log is sealed and its heads are signed with, read from settings."""
