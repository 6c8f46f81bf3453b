"""Training the TAPS scorer: ``traces`` (fully verified trees and the loss over them) and
``recipe`` (``specmix train scorer``)."""
