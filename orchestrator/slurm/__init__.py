"""A Slurm cluster as a host of the sweep: its client commands (pure), the job script, the launcher whose launches
are jobs, and the session that lets Slurm place each job. Everything Slurm is here, built on host/ and transport/."""
