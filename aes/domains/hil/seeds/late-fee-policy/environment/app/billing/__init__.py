"""Accounts-receivable helpers of the billing service."""
