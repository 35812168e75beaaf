"""classify layer (see DESIGN.md data flow)."""
