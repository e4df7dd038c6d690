"""Admission: the checks a proposed task must pass before it may join the pool."""

from aes.admission.validate import ValidationReport, Validator, validate_all

__all__ = ["ValidationReport", "Validator", "validate_all"]
