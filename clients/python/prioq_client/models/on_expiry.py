from enum import StrEnum


class OnExpiry(StrEnum):
    DEAD = "dead"
    DROP = "drop"

    def __str__(self) -> str:
        return str(self.value)
