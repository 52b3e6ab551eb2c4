"""What the database itself keeps and refuses: triggers and functions the migrations install
(the log's seal, the search index, unknown counts), and how a database that refuses writes is
recognised."""
