"""A tiny program to point the agent at."""


def greet(name: str) -> str:
    """Return a greeting for name."""
    if not name:
        raise ValueError("name must not be empty")
    return f"Hello, {name}!"


def fizzbuzz(n: int) -> list[str]:
    """FizzBuzz from 1 to n (the agent can be asked to find the bug)."""
    out = []
    for i in range(1, n):
        if i % 15 == 0:
            out.append("FizzBuzz")
        elif i % 3 == 0:
            out.append("Fizz")
        elif i % 5 == 0:
            out.append("Buzz")
        else:
            out.append(str(i))
    return out


if __name__ == "__main__":
    print(greet("Neovim"))
    print(", ".join(fizzbuzz(15)))
