"""Storage for data between acting and learning: the replay buffer of off-policy algorithms."""
