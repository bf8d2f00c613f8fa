"""What keeps a process within its means: the executor, deadlines, bounded calls."""
