"""What is computed from the lines: word counts, keyed sums of CSV records, sliding windows."""
