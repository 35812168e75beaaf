"""config layer (see DESIGN.md data flow)."""
