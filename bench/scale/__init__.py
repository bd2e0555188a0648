"""Scale-out on a standalone cluster of namespace hosts: the app's gain against the machine's."""
