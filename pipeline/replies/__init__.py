"""Reading the observer's reply: XML tags, the parser, text normalisation, the output classifier."""
