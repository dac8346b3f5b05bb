from enum import StrEnum


class Effect(StrEnum):
    NONE = "none"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return str(self.value)
