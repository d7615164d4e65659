"""What people see: the command line, status, inbox and reports."""
