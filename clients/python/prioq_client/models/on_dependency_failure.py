from enum import StrEnum


class OnDependencyFailure(StrEnum):
    DEAD = "dead"
    IGNORE = "ignore"

    def __str__(self) -> str:
        return str(self.value)
