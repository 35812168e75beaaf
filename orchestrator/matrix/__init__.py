"""matrix layer (see DESIGN.md data flow)."""
