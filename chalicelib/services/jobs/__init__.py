"""Jobs: creating them (one path) and managing them."""
