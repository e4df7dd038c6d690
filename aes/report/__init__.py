"""Human-readable reports: tables in the terminal, files in the run dir."""
