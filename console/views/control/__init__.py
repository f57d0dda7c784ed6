"""Control: prompts to place, reserve, release, submit; workload, reservation, people panels."""
