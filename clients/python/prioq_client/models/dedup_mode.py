from enum import StrEnum


class DedupMode(StrEnum):
    DROP = "drop"
    REPLACE = "replace"

    def __str__(self) -> str:
        return str(self.value)
