"""The software-engineering domain (paper App. C): a repository with an issue, public regression
tests in the repository, a reference fix as a patch, and private tests (see instructions/ and checks.py)."""
