"""Fakes of what torch.cuda returns about a GPU, shared by the monitor and environment tests."""


class CUuuid:
    """torch's ``_CUuuid`` (``get_device_properties(i).uuid``): prints the UUID without "GPU-"."""

    def __init__(self, text):
        self.text = text

    def __str__(self):
        return self.text
