"""harvest layer (see DESIGN.md data flow)."""
