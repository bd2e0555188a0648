"""`python -m streaming_app`: the same CLI as the `streaming-app` console script."""

from streaming_app.cli.main import main

if __name__ == "__main__":
    main()
