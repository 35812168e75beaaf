"""report layer (see DESIGN.md data flow)."""
