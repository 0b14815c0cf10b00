"""The stages' interfaces, below every implementation (docs/architecture.md#folders): a round's plan (`plans`), the
round rules (`rounds`) and a decide stage that picks rounds itself (`decide`). The scheduler (core/) calls them; the
stage folders implement them and import nothing above."""
