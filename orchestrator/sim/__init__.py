"""sim layer (see DESIGN.md data flow)."""
