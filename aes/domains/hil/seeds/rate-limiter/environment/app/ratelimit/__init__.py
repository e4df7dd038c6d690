"""Request rate limiting for the public API gateway."""
